//! The client's one error type.

use std::net::SocketAddr;
use std::time::Duration;

use crate::retry::{AttemptFailure, says_cas_not_applied};

/// Why a request or a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A node answered with an error status (or the call to it failed in
    /// the transport, which tonic also reports as a status). The status is
    /// kept whole: its code, message and source.
    #[error("{node}: {}: {}", .source.code(), .source.message())]
    Status {
        /// The node that was asked.
        node: SocketAddr,
        /// What it answered.
        #[source]
        source: tonic::Status,
    },

    /// No seed could be reached, or none answered the ring and schema
    /// questions. Holds the last seed's failure.
    #[error("cannot reach any seed ({seeds}): {source}")]
    NoSeed {
        /// The seeds tried, as given.
        seeds: String,
        /// The last one's failure.
        #[source]
        source: Box<ClientError>,
    },

    /// A seed address does not resolve, or resolves to nothing.
    #[error("cannot resolve {address}: {reason}")]
    Resolve {
        /// The address as given (`HOST:PORT`).
        address: String,
        /// Why.
        reason: String,
    },

    /// A node's address could not become a gRPC endpoint (bad TLS settings).
    #[error("invalid endpoint {address}: {source}")]
    Endpoint {
        /// The node's client address.
        address: SocketAddr,
        /// tonic's reason.
        #[source]
        source: tonic::transport::Error,
    },

    /// Connecting to a node failed (refused, unreachable, TLS handshake).
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// The node's client address.
        address: SocketAddr,
        /// tonic's reason.
        #[source]
        source: tonic::transport::Error,
    },

    /// The request did not complete within its timeout on `node`.
    #[error("{node}: no answer within {timeout:?}")]
    Timeout {
        /// The node that was asked.
        node: SocketAddr,
        /// The per-request timeout.
        timeout: Duration,
    },

    /// The input was refused before anything was sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// A node's description of the cluster does not parse (a node of
    /// another version).
    #[error("a node described the cluster wrongly: {0}")]
    Topology(String),

    /// The cluster the client knows of has no node to send to.
    #[error("no node is known to send the request to")]
    NoNode,
}

/// The client's result type.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

impl ClientError {
    /// The gRPC status a node answered with, if that is what failed.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            ClientError::Status { source, .. } => Some(source),
            ClientError::NoSeed { source, .. } => source.status(),
            _ => None,
        }
    }

    /// The gRPC code of the failure: the node's for a status, `UNAVAILABLE`
    /// for a node that cannot be reached, `DEADLINE_EXCEEDED` for a timeout,
    /// `INVALID_ARGUMENT` for bad input.
    pub fn code(&self) -> tonic::Code {
        match self {
            ClientError::Status { source, .. } => source.code(),
            ClientError::NoSeed { source, .. } => source.code(),
            ClientError::Timeout { .. } => tonic::Code::DeadlineExceeded,
            ClientError::InvalidRequest(_) => tonic::Code::InvalidArgument,
            ClientError::Topology(_) => tonic::Code::Internal,
            ClientError::Resolve { .. }
            | ClientError::Endpoint { .. }
            | ClientError::Connect { .. }
            | ClientError::NoNode => tonic::Code::Unavailable,
        }
    }

    /// Whether this failure of a compare-and-set ([`crate::Client::put_if`],
    /// [`crate::Client::delete_if`]) leaves its outcome **unknown**: it may
    /// have been applied, or may still be by a later Paxos round that
    /// finds its proposal (CASSANDRA-6013). Read the key with
    /// [`crate::Client::get_serial`] to learn what happened; retrying the
    /// compare-and-set instead could apply it twice, or answer "not
    /// applied" to one that did apply.
    ///
    /// False only when it certainly was not applied:
    /// - the node said so: the `x-ringstore-cas: not-applied` metadata
    ///   entry (on `UNAVAILABLE`, contention's `ABORTED`, a bad condition's
    ///   `INVALID_ARGUMENT`);
    /// - the node refused the request as it stands, with one of gRPC's
    ///   codes for that: `INVALID_ARGUMENT` (a key or value too long),
    ///   `NOT_FOUND` (no such keyspace), `PERMISSION_DENIED`,
    ///   `UNAUTHENTICATED`, `UNIMPLEMENTED` (a node without lightweight
    ///   transactions). A node checks the request, its keyspace and the
    ///   caller's rights before the first Paxos round, and every failure
    ///   after that round has begun is marked or unknown, so these never
    ///   follow a proposal;
    /// - the request never reached a node (no seed, a name that does not
    ///   resolve, a refused connection, input refused before sending).
    ///
    /// Every other failure is unknown: a timeout or `DEADLINE_EXCEEDED`,
    /// a broken connection, and an `UNAVAILABLE`, `ABORTED` or `INTERNAL`
    /// without the mark. For requests other than compare-and-sets the
    /// answer means nothing.
    pub fn is_cas_unknown(&self) -> bool {
        match self {
            ClientError::Status { source, .. } => {
                let refused = matches!(
                    source.code(),
                    tonic::Code::InvalidArgument
                        | tonic::Code::NotFound
                        | tonic::Code::PermissionDenied
                        | tonic::Code::Unauthenticated
                        | tonic::Code::Unimplemented
                );
                !(refused
                    || says_cas_not_applied(source)
                    || AttemptFailure::of_status(source) == AttemptFailure::Unreachable)
            }
            ClientError::NoSeed { .. }
            | ClientError::Resolve { .. }
            | ClientError::Endpoint { .. }
            | ClientError::Connect { .. }
            | ClientError::InvalidRequest(_)
            | ClientError::Topology(_)
            | ClientError::NoNode => false,
            ClientError::Timeout { .. } => true,
        }
    }

    /// This error as a gRPC status: the node's own if it answered one.
    pub fn into_status(self) -> tonic::Status {
        match self {
            ClientError::Status { source, .. } => source,
            other => tonic::Status::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::{CAS_NOT_APPLIED_HEADER, CAS_NOT_APPLIED_VALUE};

    fn node() -> SocketAddr {
        "127.0.0.1:7100".parse().unwrap()
    }

    fn status(source: tonic::Status) -> ClientError {
        ClientError::Status {
            node: node(),
            source,
        }
    }

    #[test]
    fn a_compare_and_set_is_unknown_unless_marked_refused_as_it_stands_or_never_sent() {
        let mut contended = tonic::Status::aborted("contention; not applied");
        contended.metadata_mut().insert(
            CAS_NOT_APPLIED_HEADER,
            tonic::metadata::MetadataValue::from_static(CAS_NOT_APPLIED_VALUE),
        );
        assert!(!status(contended).is_cas_unknown());
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!status(tonic::Status::from_error(Box::new(refused))).is_cas_unknown());
        assert!(!ClientError::NoNode.is_cas_unknown());
        assert!(!ClientError::InvalidRequest("empty key".into()).is_cas_unknown());

        let timeout = ClientError::Timeout {
            node: node(),
            timeout: Duration::from_secs(1),
        };
        assert!(timeout.is_cas_unknown());
        assert!(status(tonic::Status::deadline_exceeded("the result is unknown")).is_cas_unknown());
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(status(tonic::Status::from_error(Box::new(reset))).is_cas_unknown());
        // Unmarked failures that may follow a proposal.
        for unknown in [
            tonic::Status::unavailable("draining"),
            tonic::Status::aborted("contention"),
            tonic::Status::internal("storage"),
            tonic::Status::cancelled("gone"),
        ] {
            assert!(status(unknown.clone()).is_cas_unknown(), "{unknown:?}");
        }
        // Refusals of the request as it stands.
        for refused in [
            tonic::Status::invalid_argument("key too long"),
            tonic::Status::not_found("no keyspace"),
            tonic::Status::permission_denied("no write"),
            tonic::Status::unauthenticated("who"),
        ] {
            assert!(!status(refused.clone()).is_cas_unknown(), "{refused:?}");
        }
    }
}
