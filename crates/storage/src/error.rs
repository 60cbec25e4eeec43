//! The storage crate's one error type.

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A stored cell could not be decoded: the data is corrupt or from an
    /// unknown format version.
    #[error("corrupt cell: {reason}")]
    CorruptCell {
        /// What is wrong.
        reason: String,
    },

    /// The sled engine failed.
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
}

/// The storage crate's result type.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
