//! How a coordinated read or write, or one of its calls to a replica, fell
//! short: the errors of the coordinator and its peer calls that the
//! replication crate does not already name (its `Unavailable`,
//! `WriteTimeout` and `ReadFailure` reach the client as they are).
//!
//! Each variant keeps what the client or the operator needs to act: which
//! replica, which call, how long it was given, how many acks the level
//! needed. The gRPC code of each is in [`CoordinatorError::code`]; like the
//! replication crate's errors, a write that may have been applied answers
//! `UNAVAILABLE` or `DEADLINE_EXCEEDED` with a message that says so.

use std::net::SocketAddr;
use std::time::Duration;

use ringstore_replication::{ConsistencyLevel, ReadRepairFailure};
use tonic::Code;

/// Why a coordinated request or one of its replica calls failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// Every replica answered (or was given up on) and too few acked: the
    /// write failed at its level, but some replicas may hold it.
    #[error(
        "write failed at consistency level {level}: {acked} of {required} required acks \
         received; the write may have been applied on some replicas"
    )]
    WriteFailed {
        /// The write's level.
        level: ConsistencyLevel,
        /// Acks received (hints included at `ANY`).
        acked: u32,
        /// Acks the level needed.
        required: u32,
    },

    /// A read found replicas that disagree, and the newest value could not
    /// be written to enough of them in time.
    #[error(transparent)]
    ReadRepair(#[from] ReadRepairFailure),

    /// A call to a replica (which may carry many requests) got no answer in
    /// time.
    #[error("{replica}: no answer to {rpc} within {after:?}")]
    NoAnswer {
        /// The replica called.
        replica: SocketAddr,
        /// The call (`Apply`, `ReadMany`).
        rpc: &'static str,
        /// How long it was given.
        after: Duration,
    },

    /// The task that carried a request to a replica ended without handing
    /// back an answer (the node is shutting down, or the task failed).
    #[error("{}the {what} was abandoned", replica.map(|r| format!("{r}: ")).unwrap_or_default())]
    Abandoned {
        /// The replica it was bound for, if it had one.
        replica: Option<SocketAddr>,
        /// What was abandoned (`replica write`, `read's replica round`).
        what: &'static str,
    },

    /// A replica answered the call but refused this mutation (its reason
    /// is the replica's own text, passed on as it came).
    #[error("{replica}: {reason}")]
    Refused {
        /// The replica.
        replica: SocketAddr,
        /// Its reason.
        reason: String,
    },
}

impl CoordinatorError {
    /// The gRPC status code this error is answered with.
    pub fn code(&self) -> Code {
        match self {
            CoordinatorError::WriteFailed { .. } => Code::Unavailable,
            CoordinatorError::ReadRepair(_) | CoordinatorError::NoAnswer { .. } => {
                Code::DeadlineExceeded
            }
            CoordinatorError::Abandoned { .. } | CoordinatorError::Refused { .. } => Code::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::error::NodeError;

    /// The coordinator's errors answer with the codes its string errors
    /// had: a write that fell short `UNAVAILABLE` (the client may retry
    /// elsewhere), anything that ran out of time `DEADLINE_EXCEEDED`, a
    /// replica's refusal or an abandoned task `INTERNAL`.
    #[test]
    fn each_shortfall_has_its_code_and_says_what_happened() {
        let replica: SocketAddr = "127.0.0.2:7000".parse().expect("an address");
        let cases: Vec<(CoordinatorError, Code, &str)> = vec![
            (
                CoordinatorError::WriteFailed {
                    level: ConsistencyLevel::Quorum,
                    acked: 1,
                    required: 2,
                },
                Code::Unavailable,
                "write failed at consistency level QUORUM: 1 of 2 required acks received; \
                 the write may have been applied on some replicas",
            ),
            (
                ReadRepairFailure {
                    level: ConsistencyLevel::Quorum,
                    holding: 1,
                    required: 2,
                }
                .into(),
                Code::DeadlineExceeded,
                "read repair at consistency level QUORUM: only 1 of 2 required replicas \
                 hold the newest value",
            ),
            (
                CoordinatorError::NoAnswer {
                    replica,
                    rpc: "ReadMany",
                    after: Duration::from_millis(250),
                },
                Code::DeadlineExceeded,
                "127.0.0.2:7000: no answer to ReadMany within 250ms",
            ),
            (
                CoordinatorError::Abandoned {
                    replica: Some(replica),
                    what: "replica write",
                },
                Code::Internal,
                "127.0.0.2:7000: the replica write was abandoned",
            ),
            (
                CoordinatorError::Abandoned {
                    replica: None,
                    what: "read's replica round",
                },
                Code::Internal,
                "the read's replica round was abandoned",
            ),
            (
                CoordinatorError::Refused {
                    replica,
                    reason: "keyspace dropped".into(),
                },
                Code::Internal,
                "127.0.0.2:7000: keyspace dropped",
            ),
        ];
        for (error, code, message) in cases {
            let error = NodeError::from(error);
            assert_eq!(error.code(), code, "{error}");
            assert_eq!(error.to_string(), message);
        }
    }

    /// An error shared by many waiters answers each of them with its own
    /// code and message, whether a waiter gets the last reference (the
    /// error itself) or not (`NodeError::Shared`).
    #[test]
    fn a_shared_error_keeps_its_code_and_message_for_every_waiter() {
        let shared = Arc::new(NodeError::from(CoordinatorError::NoAnswer {
            replica: "127.0.0.3:7000".parse().expect("an address"),
            rpc: "Apply",
            after: Duration::from_secs(2),
        }));
        let check = |error: &NodeError| {
            assert_eq!(error.code(), Code::DeadlineExceeded);
            assert_eq!(
                error.to_string(),
                "127.0.0.3:7000: no answer to Apply within 2s"
            );
        };
        let first = NodeError::from(shared.clone());
        assert!(matches!(first, NodeError::Shared(_)));
        check(&first);
        drop(first);
        let last = NodeError::from(shared);
        assert!(matches!(last, NodeError::Coordinator(_)));
        check(&last);
    }
}
