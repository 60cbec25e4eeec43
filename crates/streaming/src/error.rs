//! The streaming crate's one error type.

use ringstore_placement::{HostId, TokenRange};

/// Why a streaming operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamingError {
    /// The store failed (reading a range, or persisting checkpoints).
    #[error("storage: {0}")]
    Storage(#[from] ringstore_storage::StorageError),

    /// An operation's persisted checkpoints cannot be decoded (corrupt, or
    /// of an unknown format version). Nothing was changed.
    #[error("the stream checkpoints {name:?} are corrupt")]
    CorruptCheckpoints {
        /// The meta record's name (`stream:<operation>`).
        name: String,
    },

    /// A blocking task (a range scan for an estimate) panicked or was
    /// cancelled.
    #[error("{what}: {source}")]
    Task {
        /// What the task was doing.
        what: &'static str,
        /// Why it did not finish.
        #[source]
        source: tokio::task::JoinError,
    },

    /// A range fetch ran out of attempts; its checkpoint is kept, so a later
    /// attempt resumes where this one stopped.
    #[error("could not fetch range {range} after {attempts} attempts; last error: {last_error}")]
    GaveUp {
        /// The range.
        range: TokenRange,
        /// How many attempts were made.
        attempts: u32,
        /// Why the last one failed (from the source it used, if any).
        #[source]
        last_error: FetchFailure,
    },
}

/// Why one pass of a range fetch failed: what the fetch state machine
/// ([`RangeFetcher`](crate::RangeFetcher)) is told, and what it reports when
/// it gives up.
#[derive(Debug, thiserror::Error)]
pub enum FetchFailure {
    /// No source of the range was up.
    #[error("no source was up")]
    NoSourceUp,

    /// The source or the network failed (the stream could not be opened,
    /// broke, ended early or went idle).
    #[error("{source_host}: {error}")]
    Transport {
        /// The source used.
        source_host: HostId,
        /// What went wrong, as the transport said it.
        #[source]
        error: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A checksum did not match: the pass is discarded.
    #[error("{source_host}: checksum mismatch: {detail}")]
    Corrupt {
        /// The source used.
        source_host: HostId,
        /// Which checksum, and both values.
        detail: String,
    },

    /// Storing what arrived failed.
    #[error("{source_host}: storing: {error}")]
    Local {
        /// The source used.
        source_host: HostId,
        /// The local failure.
        #[source]
        error: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The streaming crate's result type.
pub type Result<T, E = StreamingError> = std::result::Result<T, E>;
