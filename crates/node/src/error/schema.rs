//! Why a schema change did not reach agreement, or a keyspace could not be
//! answered for, or a peer's schema entry does not decode.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use std::net::SocketAddr;
use std::time::Duration;

use tonic::Code;

/// Why a schema operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The change is applied on this node, but these live nodes did not
    /// confirm it in time (it spreads by the background exchange).
    #[error(
        "the schema change is applied here but not yet on every live node (it will spread): {}",
        failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    NotAgreed {
        /// The nodes that did not confirm it, and why.
        failures: Vec<UnconfirmedPush>,
    },

    /// This node is joining and has not learned the keyspace from the
    /// cluster yet (it may exist).
    #[error(
        "this node is joining and has not learned keyspace {0:?} from the cluster yet; \
         ask another node"
    )]
    KeyspaceNotLearned(String),

    /// A schema entry on the wire without its keyspace.
    #[error("schema entry without keyspace")]
    EntryWithoutKeyspace,
}

impl SchemaError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            SchemaError::NotAgreed { .. } => Code::DeadlineExceeded,
            SchemaError::KeyspaceNotLearned(_) => Code::Unavailable,
            SchemaError::EntryWithoutKeyspace => Code::InvalidArgument,
        }
    }
}

/// A live node that did not confirm a schema push.
#[derive(Debug)]
pub struct UnconfirmedPush {
    /// The node's internode address.
    pub address: SocketAddr,
    /// Why it did not confirm.
    pub failure: PushFailure,
}

impl std::fmt::Display for UnconfirmedPush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.address, self.failure)
    }
}

/// Why a node did not confirm a schema push.
#[derive(Debug)]
pub enum PushFailure {
    /// It answered the push with an error.
    Refused(Box<tonic::Status>),
    /// It did not answer within the schema timeout.
    NoAnswer(Duration),
}

impl std::fmt::Display for PushFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushFailure::Refused(status) => f.write_str(status.message()),
            PushFailure::NoAnswer(timeout) => write!(f, "no answer within {timeout:?}"),
        }
    }
}
