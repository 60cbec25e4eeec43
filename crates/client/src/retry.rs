//! [`RetryPolicy`]: whether a failed attempt may be tried again, on the next
//! node of the plan. Pure: decided from what the request is and how the
//! attempt failed.
//!
//! A retry is safe when doing the request twice is the same as doing it
//! once. Reads and scans are. A write with a client timestamp is too: last
//! write wins, so the same cell written twice is one cell. A write without
//! one is not — each coordinator would stamp it anew, and a retry could
//! overwrite a later write by someone else — so it is retried only when it
//! surely never reached a node (the connection was refused).
//!
//! A compare-and-set is neither: applied twice, the second sees the first's
//! value and answers "not applied" to a write that did apply. It is retried
//! only when it certainly did not apply — the connection was refused, or
//! the coordinator said so with the `x-ringstore-cas: not-applied`
//! metadata entry (too few replicas for a quorum, or rivals on the key
//! kept it from one) — and never when the outcome is unknown (a timeout, a
//! broken connection, any unmarked failure): the caller must read the key
//! with a serial read to learn what happened. A serial read is a read.

use std::num::NonZeroU32;

use tonic::Code;

/// Whether doing a request twice is the same as doing it once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idempotence {
    /// Reads, scans, and writes carrying a client timestamp.
    Idempotent,
    /// Writes whose timestamp the coordinator chooses.
    NotIdempotent,
    /// Compare-and-sets (`PutIf`, `DeleteIf`): retried only when certainly
    /// not applied ([`AttemptFailure::CasNotApplied`], or never sent).
    CompareAndSet,
}

/// The metadata entry on a status whose compare-and-set (or serial read)
/// was certainly not applied, and its value.
pub(crate) const CAS_NOT_APPLIED_HEADER: &str = "x-ringstore-cas";
pub(crate) const CAS_NOT_APPLIED_VALUE: &str = "not-applied";

/// Whether `status` carries the node's word that its compare-and-set was
/// certainly not applied.
pub(crate) fn says_cas_not_applied(status: &tonic::Status) -> bool {
    status
        .metadata()
        .get(CAS_NOT_APPLIED_HEADER)
        .is_some_and(|value| value == CAS_NOT_APPLIED_VALUE)
}

/// How an attempt failed, as far as retrying is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptFailure {
    /// The node could not be reached: the request never left the client.
    Unreachable,
    /// The connection failed while the request was out: it may have run.
    Transport,
    /// The coordinator answered `UNAVAILABLE`: too few replicas alive as it
    /// sees them, or it is draining, shutting down, or its clock is off.
    /// Another coordinator may see it otherwise.
    Unavailable,
    /// No answer in time (the client's timeout, or the coordinator's
    /// `DEADLINE_EXCEEDED`): the request may have run.
    Timeout,
    /// The coordinator could not run a compare-and-set or serial read and
    /// says it was certainly not applied (`UNAVAILABLE`: too few replicas
    /// for a quorum as it sees them; `ABORTED`: rival proposals from other
    /// coordinators kept it from one): another coordinator may do better.
    CasNotApplied,
    /// Any other answer (bad input, no such keyspace, permission denied, an
    /// internal error): asking elsewhere would get the same.
    Refused,
}

impl AttemptFailure {
    /// The failure a node's status means. A status tonic made up from a
    /// failed transport carries a source; one whose cause is a refused
    /// connection never reached the node.
    pub fn of_status(status: &tonic::Status) -> AttemptFailure {
        let source = std::error::Error::source(status);
        if source.is_some_and(is_connection_refused) {
            return AttemptFailure::Unreachable;
        }
        if says_cas_not_applied(status) {
            return match status.code() {
                Code::Unavailable | Code::Aborted => AttemptFailure::CasNotApplied,
                // Refused on its face (a missing condition, a bad level).
                _ => AttemptFailure::Refused,
            };
        }
        match status.code() {
            Code::Unavailable | Code::Unknown | Code::Cancelled if source.is_some() => {
                AttemptFailure::Transport
            }
            Code::Unavailable => AttemptFailure::Unavailable,
            Code::DeadlineExceeded => AttemptFailure::Timeout,
            _ => AttemptFailure::Refused,
        }
    }

    /// Whether the failure hints that the client's view of the cluster is
    /// stale (a node gone, moved, or refusing): learn the ring again.
    pub fn suggests_topology_change(self) -> bool {
        matches!(
            self,
            AttemptFailure::Unreachable
                | AttemptFailure::Transport
                | AttemptFailure::Unavailable
                | AttemptFailure::CasNotApplied
        )
    }
}

fn is_connection_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        current = error.source();
    }
    false
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try the next node of the plan.
    RetryNext,
    /// Give the failure to the caller.
    Fail,
}

/// Retries on another node what is safe to retry, up to a number of
/// attempts in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1: never retry).
    pub max_attempts: NonZeroU32,
}

impl Default for RetryPolicy {
    /// Three attempts: enough to step over a dead coordinator and one more.
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_attempts: NonZeroU32::new(3).expect("3 is not zero"),
        }
    }
}

impl RetryPolicy {
    /// Whether attempt number `attempt` (1 for the first) of a request of
    /// `idempotence` that failed with `failure` should be retried.
    pub fn decide(
        &self,
        idempotence: Idempotence,
        failure: AttemptFailure,
        attempt: u32,
    ) -> RetryDecision {
        if attempt >= self.max_attempts.get() {
            return RetryDecision::Fail;
        }
        let safe = match failure {
            AttemptFailure::Refused => false,
            AttemptFailure::Unreachable | AttemptFailure::CasNotApplied => true,
            AttemptFailure::Transport | AttemptFailure::Unavailable | AttemptFailure::Timeout => {
                idempotence == Idempotence::Idempotent
            }
        };
        if safe {
            RetryDecision::RetryNext
        } else {
            RetryDecision::Fail
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AttemptFailure::*;
    use Idempotence::*;

    #[test]
    fn idempotent_requests_retry_every_failure_but_a_refusal() {
        let policy = RetryPolicy::default();
        for failure in [Unreachable, Transport, Unavailable, Timeout] {
            assert_eq!(
                policy.decide(Idempotent, failure, 1),
                RetryDecision::RetryNext
            );
        }
        assert_eq!(policy.decide(Idempotent, Refused, 1), RetryDecision::Fail);
    }

    #[test]
    fn a_write_without_a_timestamp_retries_only_what_never_left() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.decide(NotIdempotent, Unreachable, 1),
            RetryDecision::RetryNext
        );
        for failure in [Transport, Unavailable, Timeout, Refused] {
            assert_eq!(
                policy.decide(NotIdempotent, failure, 1),
                RetryDecision::Fail
            );
        }
    }

    fn marked(status: tonic::Status) -> tonic::Status {
        let mut status = status;
        status.metadata_mut().insert(
            CAS_NOT_APPLIED_HEADER,
            tonic::metadata::MetadataValue::from_static(CAS_NOT_APPLIED_VALUE),
        );
        status
    }

    #[test]
    fn a_compare_and_set_retries_only_what_certainly_did_not_apply() {
        let policy = RetryPolicy::default();
        for retried in [Unreachable, CasNotApplied] {
            assert_eq!(
                policy.decide(CompareAndSet, retried, 1),
                RetryDecision::RetryNext,
                "{retried:?}"
            );
        }
        // Unknown outcomes (and refusals) are the caller's.
        for failure in [Transport, Unavailable, Timeout, Refused] {
            assert_eq!(
                policy.decide(CompareAndSet, failure, 1),
                RetryDecision::Fail,
                "{failure:?}"
            );
        }
        assert_eq!(
            policy.decide(CompareAndSet, CasNotApplied, 3),
            RetryDecision::Fail,
            "attempts still stop at the maximum"
        );
    }

    #[test]
    fn only_a_marked_status_says_not_applied_and_a_marked_bad_request_is_a_refusal() {
        let contended = marked(tonic::Status::aborted("contention; not applied"));
        assert_eq!(AttemptFailure::of_status(&contended), CasNotApplied);
        let no_quorum = marked(tonic::Status::unavailable("1 of 2; not applied"));
        assert_eq!(AttemptFailure::of_status(&no_quorum), CasNotApplied);
        assert!(CasNotApplied.suggests_topology_change());
        let missing = marked(tonic::Status::invalid_argument("needs its expected value"));
        assert_eq!(AttemptFailure::of_status(&missing), Refused);
        // The same codes unmarked: a plain UNAVAILABLE (not retried for a
        // compare-and-set) and a refusal.
        assert_eq!(
            AttemptFailure::of_status(&tonic::Status::unavailable("draining")),
            Unavailable
        );
        assert_eq!(
            AttemptFailure::of_status(&tonic::Status::aborted("contention")),
            Refused
        );
        let mut wrong = tonic::Status::unavailable("x");
        wrong
            .metadata_mut()
            .insert(CAS_NOT_APPLIED_HEADER, "maybe".parse().unwrap());
        assert_eq!(AttemptFailure::of_status(&wrong), Unavailable);
    }

    #[test]
    fn attempts_stop_at_the_maximum() {
        let policy = RetryPolicy {
            max_attempts: NonZeroU32::new(2).unwrap(),
        };
        assert_eq!(
            policy.decide(Idempotent, Timeout, 1),
            RetryDecision::RetryNext
        );
        assert_eq!(policy.decide(Idempotent, Timeout, 2), RetryDecision::Fail);
    }

    #[test]
    fn statuses_classify_by_code_and_transport_source() {
        assert_eq!(
            AttemptFailure::of_status(&tonic::Status::unavailable("too few replicas")),
            Unavailable
        );
        assert_eq!(
            AttemptFailure::of_status(&tonic::Status::deadline_exceeded("slow")),
            Timeout
        );
        assert_eq!(
            AttemptFailure::of_status(&tonic::Status::not_found("no keyspace")),
            Refused
        );
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let status = tonic::Status::from_error(Box::new(refused));
        assert_eq!(AttemptFailure::of_status(&status), Unreachable);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let status = tonic::Status::from_error(Box::new(reset));
        assert_eq!(AttemptFailure::of_status(&status), Transport);
        assert!(Transport.suggests_topology_change() && !Refused.suggests_topology_change());
    }
}
