//! The placement crate's one error type.

use crate::host::HostId;
use crate::token::Token;

/// Why a placement operation was refused. Every variant leaves its inputs unchanged.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// Cassandra gives the empty key the minimum token; ringstore refuses it instead.
    #[error("a key must not be empty")]
    EmptyKey,

    /// A token written as text is not a signed 64-bit integer.
    #[error("invalid token {text:?}: {source}")]
    InvalidToken {
        /// The text that failed to parse.
        text: String,
        /// Why it failed.
        source: std::num::ParseIntError,
    },

    /// A token list (such as `initial_token`) names the same token twice.
    #[error("token {token} appears twice in the token list")]
    DuplicateTokenInList {
        /// The repeated token.
        token: Token,
    },

    /// Two members of a ring claim the same token.
    #[error("token {token} is claimed by both {first} and {second}")]
    TokenCollision {
        /// The contested token.
        token: Token,
        /// The member that claimed it first.
        first: HostId,
        /// The member that claimed it again.
        second: HostId,
    },

    /// The same host was added to a ring twice.
    #[error("host {host} is already a member of the ring")]
    DuplicateHost {
        /// The repeated host.
        host: HostId,
    },

    /// A ring member has no tokens.
    #[error("host {host} has no tokens")]
    NoTokens {
        /// The host without tokens.
        host: HostId,
    },

    /// A replication factor of zero was requested where at least one replica is needed.
    #[error("replication factor must be at least 1 (data center {dc:?})")]
    ZeroReplicationFactor {
        /// The data center, empty for SimpleStrategy.
        dc: String,
    },

    /// Token allocation cannot find enough free tokens (the ring is absurdly full).
    #[error("cannot allocate {wanted} tokens: the ring has no room")]
    RingFull {
        /// How many tokens were asked for.
        wanted: usize,
    },
}

/// The placement crate's result type.
pub type Result<T, E = PlacementError> = std::result::Result<T, E>;
