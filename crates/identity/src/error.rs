//! What can go wrong with a node's identity.

use std::path::PathBuf;

/// Why the identity could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The key file cannot be read or written.
    #[error("identity key file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file holds something else than keys of a known format.
    #[error("identity key file {path} is damaged or of an unknown format: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The key file can be read by others than its owner.
    #[error(
        "identity key file {path} can be read by others (mode {mode:o}): \
         chmod 600 it, since anyone who reads it can act as this node"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}
