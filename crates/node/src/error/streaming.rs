//! Why this node could not move a token range, either side of a stream:
//! no replica to fetch it from, or the sending side stopped (its scan
//! failed, or the receiver went away).
//!
//! The streaming crate's own errors (checkpoints, fetches out of attempts)
//! are [`ringstore_streaming::StreamingError`]. Imports nothing of the node
//! crate: every module imports the error folder.

use ringstore_placement::TokenRange;
use tonic::Code;

/// Why a range could not be fetched or sent.
#[derive(Debug, thiserror::Error)]
pub enum RangeStreamError {
    /// A range to fetch has no replica to fetch it from.
    #[error("no replica to fetch range {0} from")]
    NoSource(TokenRange),

    /// Sending a range to the node that asked for it stopped.
    #[error("sending range {range}: {source}")]
    Send {
        /// The range.
        range: TokenRange,
        /// Why it stopped.
        #[source]
        source: SendFailure,
    },
}

impl RangeStreamError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            RangeStreamError::NoSource(_) => Code::Unavailable,
            RangeStreamError::Send { .. } => Code::Internal,
        }
    }
}

/// Why the sending side of a stream stopped.
#[derive(Debug, thiserror::Error)]
pub enum SendFailure {
    /// The scan of the range failed in the store.
    #[error("{0}")]
    Scan(#[source] ringstore_storage::StorageError),

    /// The scan ended without handing over the stream's checksum.
    #[error("the scan ended without its checksum")]
    NoChecksum,

    /// The scanning task panicked or was cancelled.
    #[error("the scan failed: {0}")]
    ScanTask(#[source] tokio::task::JoinError),

    /// The sending task stopped taking the scan's chunks.
    #[error("the sender went away")]
    SenderGone,

    /// The node that asked for the range stopped listening.
    #[error("the receiver went away")]
    ReceiverGone,
}
