//! Why a snapshot could not be taken, cleared or restored: a bad or taken
//! tag, no such snapshot, no files to restore, a file that does not decode.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use std::path::PathBuf;

use tonic::Code;

/// Why a snapshot operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A tag that is not 1 to 100 letters, digits, `-`, `_` or `.`, or
    /// starts with `.` (it names a directory).
    #[error(
        "invalid snapshot tag {0:?}: use 1 to 100 letters, digits, '-', '_' or '.', not \
         starting with '.'"
    )]
    BadTag(String),

    /// A snapshot with that tag exists on this node.
    #[error("snapshot {0} exists already; choose another tag or clear it first")]
    TagTaken(String),

    /// No snapshot with that tag on this node.
    #[error("there is no snapshot {0} on this node")]
    NoSuchSnapshot(String),

    /// A clear given both a tag and `all`, or neither.
    #[error("give either a snapshot tag or all, not both or neither")]
    TagOrAll,

    /// The snapshot has no files (for the keyspace, when one was named).
    #[error(
        "snapshot {tag} has no files{} in {}",
        keyspace.as_ref().map(|k| format!(" for keyspace {k}")).unwrap_or_default(),
        dir.display()
    )]
    NoFiles {
        /// The snapshot's tag.
        tag: String,
        /// The keyspace asked for, if one was.
        keyspace: Option<String>,
        /// The snapshot's directory.
        dir: PathBuf,
    },

    /// A snapshot file does not decode.
    #[error("snapshot file {}: {source}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// Why it does not decode (a `SnapshotFileError`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SnapshotError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            SnapshotError::TagTaken(_) => Code::AlreadyExists,
            SnapshotError::BadTag(_)
            | SnapshotError::NoSuchSnapshot(_)
            | SnapshotError::TagOrAll
            | SnapshotError::NoFiles { .. }
            | SnapshotError::BadFile { .. } => Code::InvalidArgument,
        }
    }
}
