//! Why a compare-and-set or a serial read did not give an answer.
//!
//! A lightweight transaction ends in one of three ways that a client must
//! tell apart, and the errors here say which:
//! - **certainly not applied** ([`CasError::is_definitely_not_applied`]):
//!   nothing of the operation was accepted anywhere, so retrying cannot
//!   apply it twice. The status carries the metadata entry
//!   [`NOT_APPLIED_HEADER`] so that a client can tell this from a
//!   transport failure with the same code.
//! - **unknown**: some replicas may hold its proposal, which a later round
//!   can still finish (CASSANDRA-6013); the client must read (`GetSerial`)
//!   to learn what happened.
//! - a bad request, refused before anything was sent.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use ringstore_replication::ConsistencyLevel;
use tonic::Code;

/// The metadata entry on a status whose operation was certainly not
/// applied: `x-ringstore-cas: not-applied`.
pub const NOT_APPLIED_HEADER: &str = "x-ringstore-cas";
/// Its value.
pub const NOT_APPLIED_VALUE: &str = "not-applied";

/// Which Paxos round fell short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CasRound {
    /// Prepare, with the read.
    Prepare,
    /// Accept.
    Accept,
}

impl std::fmt::Display for CasRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CasRound::Prepare => "prepare",
            CasRound::Accept => "accept",
        })
    }
}

/// Why a compare-and-set or serial read has no answer.
#[derive(Debug, thiserror::Error)]
pub enum CasError {
    /// Too few replicas of the serial level's electorate are up to form a
    /// quorum: nothing was sent.
    #[error(
        "cannot achieve a {level} quorum: {alive} of the {members} replicas that vote are up, \
         {required} are needed; not applied"
    )]
    Unavailable {
        /// `SERIAL` or `LOCAL_SERIAL`.
        level: &'static str,
        /// Voters up.
        alive: usize,
        /// Voters in all (natural and pending replicas).
        members: usize,
        /// The quorum.
        required: usize,
    },

    /// Too few replicas answered a round in time, and none of them holds
    /// this operation's proposal.
    #[error(
        "{votes} of the {required} replicas needed answered the {round} round in time; \
         not applied"
    )]
    NoQuorum {
        /// The round.
        round: CasRound,
        /// Replicas that said yes.
        votes: usize,
        /// The quorum.
        required: usize,
    },

    /// Rival proposals on the key kept this one from a quorum until its
    /// time ran out (it retried `attempts` times, with backoff). Nothing of
    /// it was accepted.
    #[error(
        "contention: rival proposals on this key pre-empted this one {attempts} times within \
         {waited_ms} ms; not applied"
    )]
    Contended {
        /// Rounds tried.
        attempts: u32,
        /// How long it kept trying.
        waited_ms: u64,
    },

    /// Some replicas may hold this operation's proposal: a later round may
    /// still finish it. Read the key with `GetSerial` to learn the outcome.
    #[error(
        "the result is unknown: {accepted} of the {required} replicas needed accepted the \
         proposal before the round ended; it may still be applied by a later round \
         (read the key with a serial read to find out)"
    )]
    Unknown {
        /// Replicas known to have accepted.
        accepted: usize,
        /// The quorum.
        required: usize,
    },

    /// The proposal was chosen (it will be applied), but its commit did not
    /// reach the commit consistency level in time.
    #[error(
        "the compare-and-set was applied, but its commit reached {acked} of the {required} \
         replicas the commit level {level} needs in time"
    )]
    CommitShort {
        /// The commit level.
        level: ConsistencyLevel,
        /// Replicas (or hints, at `ANY`) that took the commit.
        acked: u32,
        /// What the level needs.
        required: u32,
    },

    /// The key has no replica in this node's data center, where
    /// `LOCAL_SERIAL` needs its electorate.
    #[error("LOCAL_SERIAL: the key has no replica in data center {dc:?}")]
    NoLocalReplicas {
        /// This node's data center.
        dc: String,
    },

    /// The key's replicas do not make an electorate (none natural, or one
    /// listed twice): a placement bug, refused before anything was sent.
    #[error("the key's replicas do not make a Paxos electorate: {source}")]
    Electorate {
        /// What is wrong with them.
        #[source]
        source: ringstore_paxos::PaxosError,
    },

    /// A compare-and-set without its condition.
    #[error("a compare-and-set needs its expected value (a value, absent, or any)")]
    MissingExpected,

    /// A serial consistency level number this build does not know.
    #[error("unknown serial consistency level {0}")]
    UnknownSerialLevel(i32),

    /// A commit level that does not apply to a commit: `SERIAL` levels are
    /// not write levels, and a level this build does not know.
    #[error("commit consistency {0} is not a write consistency level")]
    BadCommitLevel(i32),
}

impl CasError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            CasError::Unavailable { .. }
            | CasError::NoQuorum { .. }
            | CasError::NoLocalReplicas { .. } => Code::Unavailable,
            CasError::Contended { .. } => Code::Aborted,
            CasError::Unknown { .. } | CasError::CommitShort { .. } => Code::DeadlineExceeded,
            CasError::Electorate { .. } => Code::Internal,
            CasError::MissingExpected
            | CasError::UnknownSerialLevel(_)
            | CasError::BadCommitLevel(_) => Code::InvalidArgument,
        }
    }

    /// Whether the operation was certainly not applied (see the module
    /// docs): a client may retry it without risk of applying it twice.
    pub fn is_definitely_not_applied(&self) -> bool {
        !matches!(
            self,
            CasError::Unknown { .. } | CasError::CommitShort { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unknown_or_a_short_commit_may_have_been_applied() {
        let cases = [
            (
                CasError::Contended {
                    attempts: 3,
                    waited_ms: 2000,
                },
                Code::Aborted,
                true,
            ),
            (
                CasError::NoQuorum {
                    round: CasRound::Prepare,
                    votes: 1,
                    required: 2,
                },
                Code::Unavailable,
                true,
            ),
            (
                CasError::Unknown {
                    accepted: 1,
                    required: 2,
                },
                Code::DeadlineExceeded,
                false,
            ),
            (
                CasError::CommitShort {
                    level: ConsistencyLevel::Quorum,
                    acked: 1,
                    required: 2,
                },
                Code::DeadlineExceeded,
                false,
            ),
        ];
        for (error, code, not_applied) in cases {
            assert_eq!(error.code(), code, "{error}");
            assert_eq!(error.is_definitely_not_applied(), not_applied, "{error}");
            let message = error.to_string();
            assert_eq!(message.ends_with("not applied"), not_applied, "{message}");
        }
    }
}
