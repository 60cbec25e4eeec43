//! [`RequestError`]: a client's or a peer's request that is malformed or out
//! of bounds — a field missing or unparsable, a value, batch or TTL over its
//! limit. Nothing was done; sent again unchanged it fails again, so every
//! variant is `INVALID_ARGUMENT`.
//!
//! The limits a variant names are the ones in force when it was refused
//! (a `max_*` setting of the node, or a constant of `limits.rs`).

use ringstore_storage::Timestamp;

/// A request field that is malformed or out of bounds.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A keyspace name left empty where one is needed.
    #[error("keyspace must not be empty")]
    EmptyKeyspaceName,

    /// A value longer than `max_value_bytes`.
    #[error("value is {len} bytes; the limit is {max} bytes (max_value_bytes)")]
    ValueTooLong {
        /// Its length, in bytes.
        len: usize,
        /// `max_value_bytes`.
        max: usize,
    },

    /// A TTL longer than the longest accepted (`limits::MAX_TTL_SECONDS`).
    #[error("ttl of {ttl} seconds exceeds the maximum of {max}")]
    TtlTooLong {
        /// The TTL asked for, in seconds.
        ttl: u32,
        /// The longest accepted, in seconds.
        max: u32,
    },

    /// An absolute expiry on a delete, which has none of its own.
    #[error("expires_at_micros is only for values, not deletes")]
    ExpiryOnDelete,

    /// Both a TTL and an absolute expiry.
    #[error("give ttl_seconds or expires_at_micros, not both")]
    TtlAndExpiry,

    /// An absolute expiry not positive, or further off than the longest TTL.
    #[error(
        "expires_at_micros {at} must be positive and at most {max_seconds} seconds from now \
         ({latest})"
    )]
    ExpiryOutOfRange {
        /// The expiry asked for, in µs since the epoch.
        at: i64,
        /// The longest TTL, in seconds.
        max_seconds: u32,
        /// The latest expiry accepted now (the node's clock plus `max_seconds`).
        latest: Timestamp,
    },

    /// A batch of more mutations than `max_batch_mutations`.
    #[error("the batch has {count} mutations; the limit is {max} (max_batch_mutations)")]
    TooManyMutations {
        /// Mutations in the batch.
        count: usize,
        /// `max_batch_mutations`.
        max: usize,
    },

    /// A batch of more bytes of keys and values than `max_batch_bytes`.
    #[error(
        "the batch holds {bytes} bytes of keys and values; the limit is {max} bytes \
         (max_batch_bytes)"
    )]
    BatchTooLarge {
        /// Bytes of keys and values in the batch.
        bytes: usize,
        /// `max_batch_bytes`.
        max: usize,
    },

    /// A `ReadMany` of more reads than one call may carry.
    #[error("a ReadMany of {count} reads; the limit is {max}")]
    TooManyReads {
        /// Reads in the call.
        count: usize,
        /// The most one call may carry.
        max: usize,
    },

    /// A field that should hold a host id (a UUID) and does not.
    #[error("{field}: {text:?} is not a host id (a UUID): {source}")]
    BadHostId {
        /// Which field (`host_id`, `sources`, `target_host_id`...).
        field: &'static str,
        /// What it held.
        text: String,
        /// Why it does not parse.
        #[source]
        source: uuid::Error,
    },

    /// A keyspace id that is not a UUID.
    #[error("invalid keyspace id {text:?}: {source}")]
    BadKeyspaceId {
        /// What the field held.
        text: String,
        /// Why it does not parse.
        #[source]
        source: uuid::Error,
    },

    /// A repair session id that is not a UUID.
    #[error("repair session id {text:?} is not a UUID: {source}")]
    BadSessionId {
        /// What the field held.
        text: String,
        /// Why it does not parse.
        #[source]
        source: uuid::Error,
    },

    /// A consistency level outside the wire enum.
    #[error("unknown consistency level {0}")]
    UnknownConsistencyLevel(i32),

    /// A stream operation this node does not know.
    #[error(transparent)]
    UnknownStreamOperation(#[from] ringstore_streaming::UnknownOperation),

    /// An internode message without the token range it must carry.
    #[error("a token range is required")]
    NoTokenRange,

    /// A replica write or a hint without its cell.
    #[error("{what} without a cell")]
    NoCell {
        /// What came without one (`mutation`, `hint`).
        what: &'static str,
    },

    /// A key that has no token (the empty key).
    #[error(transparent)]
    KeyWithoutToken(ringstore_placement::PlacementError),

    /// A Merkle tree deeper than a replica builds.
    #[error("tree depth {depth} is over the limit of {max}")]
    TreeTooDeep {
        /// The depth asked for.
        depth: u32,
        /// The deepest tree built.
        max: u8,
    },

    /// A client's send time that is not a positive count of microseconds.
    #[error("{field} must be a positive count of microseconds since the epoch")]
    BadSentAt {
        /// Where it came from (the metadata header or the request field).
        field: &'static str,
    },
}

impl RequestError {
    /// The gRPC status code: always `INVALID_ARGUMENT`.
    pub fn code(&self) -> tonic::Code {
        tonic::Code::InvalidArgument
    }
}
