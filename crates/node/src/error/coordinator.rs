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
