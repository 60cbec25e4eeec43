//! The hints crate's one error type.
//!
//! Every variant says whether anything was changed. Corrupt *stored* hints are
//! not reported through it by [`HintStore`](crate::HintStore) — they are
//! deleted and counted, because one bad entry must not stop replay to a
//! target — so these errors reach callers from [`Hint::decode`](crate::Hint::decode)
//! and from the storage engine.

use ringstore_storage::StorageError;

/// Why a hints operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HintsError {
    /// Bytes that should be an encoded hint are not one: truncated, garbage,
    /// trailing bytes, or an unknown format version. Nothing was changed.
    #[error("corrupt hint: {reason}")]
    CorruptHint {
        /// What is wrong.
        reason: String,
    },

    /// The hint's embedded cell does not decode. Nothing was changed.
    #[error("corrupt cell in hint: {source}")]
    CorruptCell {
        /// What is wrong with it.
        #[source]
        source: ringstore_cell::CellDamage,
    },

    /// A key in the hints tree is not `target (16) ++ created_at (8) ++
    /// sequence (8)`. Nothing was changed.
    #[error("corrupt hint key: {reason}")]
    CorruptKey {
        /// What is wrong.
        reason: String,
    },

    /// The storage engine failed. Writes made before the failing call in the
    /// same operation have happened (and are reflected in the counters).
    #[error("storage: {source}")]
    Storage {
        /// The engine's error.
        #[from]
        source: StorageError,
    },
}

impl HintsError {
    /// Whether the error reports corrupt bytes (retrying will not help).
    pub fn is_corruption(&self) -> bool {
        match self {
            HintsError::CorruptHint { .. }
            | HintsError::CorruptCell { .. }
            | HintsError::CorruptKey { .. } => true,
            HintsError::Storage { source } => source.is_corruption(),
        }
    }

    /// Whether the same call may succeed if tried again (an engine I/O error).
    pub fn is_retryable(&self) -> bool {
        match self {
            HintsError::Storage { source } => source.is_retryable(),
            _ => false,
        }
    }
}

/// The hints crate's result type.
pub type Result<T, E = HintsError> = std::result::Result<T, E>;
