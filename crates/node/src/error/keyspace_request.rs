//! [`KeyspaceRequestError`]: a keyspace the schema service (or the node,
//! for `system_auth`) was asked to create or alter and cannot — a missing or
//! impossible replication setting, a bad name, a name already taken — and an
//! alter that ended before it could say so.

use ringstore_placement::{PlacementError, ReplicationStrategy};

/// Why a keyspace cannot be created or altered as asked.
#[derive(Debug, thiserror::Error)]
pub enum KeyspaceRequestError {
    /// No replication strategy given.
    #[error("replication is required (SimpleStrategy or NetworkTopologyStrategy)")]
    NoReplication,

    /// A strategy whose settings do not make one (a replication factor of 0...).
    #[error("{strategy}: {source}")]
    BadStrategy {
        /// Which strategy (`SimpleStrategy`, `NetworkTopologyStrategy`).
        strategy: &'static str,
        /// Why it was refused.
        #[source]
        source: PlacementError,
    },

    /// A `NetworkTopologyStrategy` naming no data center.
    #[error("NetworkTopologyStrategy needs at least one data center")]
    NoDataCenter,

    /// A `NetworkTopologyStrategy` naming a blank data center.
    #[error("NetworkTopologyStrategy: invalid data center name {0:?}")]
    BadDataCenterName(String),

    /// A keyspace name the schema does not accept
    /// (`schema::validate_keyspace_name`).
    #[error("keyspace name {name:?} {rule}")]
    BadName {
        /// The name asked for.
        name: String,
        /// The rule it breaks.
        rule: KeyspaceNameRule,
    },

    /// `auth.replication_factor` makes no strategy for `system_auth`.
    #[error("auth.replication_factor: {0}")]
    AuthReplication(#[source] PlacementError),

    /// A keyspace of that name exists already (and `if_not_exists` was not set).
    #[error("keyspace {name:?} already exists with {strategy}")]
    AlreadyExists {
        /// Its name.
        name: String,
        /// Its replication.
        strategy: ReplicationStrategy,
    },

    /// An alter asked to answer once announced ended before it announced
    /// (its task failed or was cancelled; its own error, if any, is logged).
    #[error("the alter stopped before announcing")]
    AlterNotAnnounced,
}

impl KeyspaceRequestError {
    /// The gRPC status code.
    pub fn code(&self) -> tonic::Code {
        match self {
            KeyspaceRequestError::AlreadyExists { .. } => tonic::Code::AlreadyExists,
            KeyspaceRequestError::AlterNotAnnounced => tonic::Code::Internal,
            KeyspaceRequestError::NoReplication
            | KeyspaceRequestError::BadStrategy { .. }
            | KeyspaceRequestError::NoDataCenter
            | KeyspaceRequestError::BadDataCenterName(_)
            | KeyspaceRequestError::BadName { .. }
            | KeyspaceRequestError::AuthReplication(_) => tonic::Code::InvalidArgument,
        }
    }
}

/// A rule of keyspace names (the message reads "keyspace name "x" <rule>").
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyspaceNameRule {
    /// 1 to 48 characters.
    #[error("must be 1 to 48 characters")]
    Length,
    /// Letters, digits and underscores only.
    #[error("may contain only letters, digits and underscores")]
    Characters,
    /// `ALL`, in any case, names every keyspace in grants.
    #[error("is reserved: ALL names every keyspace in grants")]
    ReservedAll,
    /// Names beginning with `system` are the node's own.
    #[error("is reserved: names beginning with \"system\" are the node's own")]
    ReservedSystem,
}
