//! The client's one error type.

use std::net::SocketAddr;
use std::time::Duration;

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

    /// This error as a gRPC status: the node's own if it answered one.
    pub fn into_status(self) -> tonic::Status {
        match self {
            ClientError::Status { source, .. } => source,
            other => tonic::Status::new(other.code(), other.to_string()),
        }
    }
}
