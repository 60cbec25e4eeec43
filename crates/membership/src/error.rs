//! The membership crate's one error type.

use ringstore_placement::HostId;
use std::path::PathBuf;

/// Why a membership operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// The data directory belongs to another cluster; the node must not join this one.
    #[error(
        "the data directory {path} belongs to cluster {saved:?}, but this node is configured for cluster {configured:?}"
    )]
    ClusterNameMismatch {
        /// The node record's path.
        path: PathBuf,
        /// The cluster name saved there.
        saved: String,
        /// The configured cluster name.
        configured: String,
    },

    /// The node record in the data directory cannot be read or written.
    #[error("node record {path}: {source}")]
    NodeRecordIo {
        /// The node record's path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },

    /// The node record exists but is not valid.
    #[error("node record {path} is corrupt: {reason}")]
    NodeRecordCorrupt {
        /// The node record's path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A metadata blob could not be decoded.
    #[error("invalid node metadata: {reason}")]
    InvalidMetadata {
        /// What is wrong with it.
        reason: String,
    },

    /// A metadata record whose signature is not its keys'.
    #[error("metadata of {host} is not signed by the keys it names")]
    BadSignature {
        /// The host id the record names.
        host: HostId,
    },

    /// The configuration is not usable.
    #[error("invalid membership configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with it.
        reason: String,
    },

    /// Binding or using the gossip socket failed.
    #[error("gossip socket {addr}: {source}")]
    Socket {
        /// The socket address.
        addr: std::net::SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },

    /// The gossip socket cannot tell the address it is bound to.
    #[error("cannot read the gossip socket's address: {0}")]
    LocalAddress(#[source] std::io::Error),

    /// The membership task has stopped.
    #[error("the membership task has stopped")]
    Stopped,
}

/// The membership crate's result type.
pub type Result<T, E = MembershipError> = std::result::Result<T, E>;
