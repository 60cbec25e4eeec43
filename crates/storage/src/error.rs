//! The storage crate's one error type.
//!
//! Every variant says whether the store's state may have changed; callers
//! that need to decide between retrying and giving up use
//! [`StorageError::is_corruption`] and [`StorageError::is_retryable`].

use std::sync::Arc;

use ringstore_cell::KeyspaceId;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A stored cell does not read back: its checksum does not match, its
    /// layout does not hold, or its format is unknown. The one error for a
    /// damaged cell on every path (reads, scans, runs, hints); nothing was
    /// changed. The cell must not be served: another replica's copy must
    /// (see the crate docs, "Damaged cells").
    #[error("corrupt cell{}: {reason}", key.as_deref().map(|k| format!(" at key {}", printable_key(k))).unwrap_or_default())]
    CorruptCell {
        /// What is wrong.
        reason: ringstore_cell::CellDamage,
        /// The key it is stored at, when the path that found it knows it
        /// (a store read or scan does; [`Cell::decode`](crate::Cell::decode)
        /// alone does not).
        key: Option<Vec<u8>>,
    },

    /// A stored data key is not `token (8 bytes) ++ key`: the data is corrupt.
    /// Nothing was changed.
    #[error("corrupt data key: {reason}")]
    CorruptKey {
        /// What is wrong.
        reason: String,
    },

    /// The key cannot be stored (ringstore refuses the empty key, which has no
    /// token). Nothing was changed.
    #[error("invalid key: {source}")]
    InvalidKey {
        /// Why the partitioner refused it.
        #[source]
        source: ringstore_placement::PlacementError,
    },

    /// Text that should name a keyspace is not a UUID.
    #[error(transparent)]
    InvalidKeyspaceId(#[from] ringstore_cell::InvalidKeyspaceId),

    /// The keyspace was dropped through this store; its id is dead and is
    /// never used again. Nothing was changed.
    #[error("keyspace {keyspace} has been dropped")]
    KeyspaceDropped {
        /// The dropped keyspace.
        keyspace: KeyspaceId,
    },

    /// The tree behind a handle has been dropped: the handle is stale.
    /// Nothing was changed.
    #[error("tree {name:?} has been dropped")]
    TreeDropped {
        /// The tree's name.
        name: String,
    },

    /// The store has been closed and refuses writes. Nothing was changed.
    #[error("the store is closed")]
    Closed,

    /// A flush that the operation waited for failed, so its writes are applied
    /// (visible to reads) but not known to be durable.
    #[error("flush failed: {source}")]
    FlushFailed {
        /// The engine's error, shared by every writer of the flush's group.
        #[source]
        source: Arc<StorageError>,
    },

    /// A flush never completed: its blocking task was discarded (the runtime
    /// shut down) or the engine panicked. Whether the writes it covered are
    /// durable is unknown.
    #[error("flush abandoned: the flush task panicked or was never run")]
    FlushAbandoned,

    /// An engine call on the blocking pool never returned: the runtime shut
    /// down or the engine panicked. A write's outcome is unknown.
    #[error("storage call abandoned: {source}")]
    CallAbandoned {
        /// Why the blocking task did not finish.
        #[source]
        source: tokio::task::JoinError,
    },

    /// A run file (see `runs`) that does not check: its data is lost
    /// from this node until a repair brings it back.
    #[error("corrupt run file {path:?}: {reason}")]
    CorruptRun {
        /// The file.
        path: std::path::PathBuf,
        /// What did not check.
        reason: String,
    },

    /// Cells handed to a run out of data key order.
    #[error("cells appended to a run must come in increasing (token, key) order")]
    RunOutOfOrder,

    /// The engine's disk failed (a full disk, an I/O error).
    #[error("disk: {0}")]
    Disk(#[source] std::io::Error),

    /// The sled engine failed.
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
}

impl From<ringstore_cell::CellDamage> for StorageError {
    /// A cell that does not decode, at a key the caller adds with
    /// [`StorageError::at_key`] when it knows it.
    fn from(reason: ringstore_cell::CellDamage) -> StorageError {
        StorageError::CorruptCell { reason, key: None }
    }
}

impl StorageError {
    /// Whether the error reports corrupt stored data (rather than a refused
    /// request or an I/O failure): retrying will not help, repair might.
    pub fn is_corruption(&self) -> bool {
        match self {
            StorageError::CorruptCell { .. }
            | StorageError::CorruptKey { .. }
            | StorageError::CorruptRun { .. } => true,
            StorageError::Sled(sled::Error::Corruption { .. }) => true,
            StorageError::FlushFailed { source } => source.is_corruption(),
            _ => false,
        }
    }

    /// Whether the error is one damaged entry of a [`Scan`](crate::Scan): a
    /// cell that does not read back, or a data key that is not `token ++
    /// key`. The scan goes on after it (the store counted and logged it);
    /// a caller may skip the row. Any other error ended the scan.
    pub fn is_damaged_entry(&self) -> bool {
        matches!(
            self,
            StorageError::CorruptCell { .. } | StorageError::CorruptKey { .. }
        )
    }

    /// The error with `key` as the key of a [`StorageError::CorruptCell`]
    /// that names none; any other error as it is.
    pub fn at_key(self, key: &[u8]) -> StorageError {
        match self {
            StorageError::CorruptCell { reason, key: None } => StorageError::CorruptCell {
                reason,
                key: Some(key.to_vec()),
            },
            other => other,
        }
    }

    /// Whether the same request may succeed if tried again: a failed flush or
    /// an engine I/O error. Invalid input, dropped keyspaces, a closed store
    /// and corruption are final.
    pub fn is_retryable(&self) -> bool {
        match self {
            StorageError::FlushFailed { source } => !source.is_corruption(),
            StorageError::Sled(sled::Error::Io(_)) | StorageError::Disk(_) => true,
            _ => false,
        }
    }
}

/// `key` as text for logs and messages: printable ASCII as it is, other
/// bytes escaped (`\xff`).
pub fn printable_key(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// The storage crate's result type.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
