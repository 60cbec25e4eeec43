//! Why a replica's part in a Paxos round (prepare, accept, commit) failed.
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use ringstore_paxos::PaxosError;
use ringstore_storage::{KeyspaceId, printable_key};
use tonic::Code;

/// Why a Paxos call to this replica failed. In every case nothing was
/// changed, and no answer was given that the proposer could count.
#[derive(Debug, thiserror::Error)]
pub enum PaxosReplicaError {
    /// The key's stored acceptor state does not read back. The replica
    /// takes no part in rounds for the key until the state is repaired:
    /// starting again from empty state could promise a ballot older than
    /// one it already promised. `DATA_LOSS`, as a damaged cell.
    #[error(
        "the Paxos state of key {} in keyspace {keyspace} is corrupt: {source}",
        printable_key(key)
    )]
    CorruptState {
        /// The keyspace.
        keyspace: KeyspaceId,
        /// The key.
        key: Vec<u8>,
        /// What is wrong with the stored bytes
        /// ([`PaxosError::CorruptState`]).
        #[source]
        source: PaxosError,
    },

    /// The keyspace's stored Paxos floor does not read back. The replica
    /// refuses its rounds until it is repaired: without the floor, purged
    /// promises would be forgotten. `DATA_LOSS`.
    #[error("the Paxos floor of keyspace {keyspace} is corrupt: {length} bytes, format {format:?}")]
    CorruptFloor {
        /// The keyspace.
        keyspace: KeyspaceId,
        /// The stored value's length.
        length: usize,
        /// Its first byte, the format (none when empty).
        format: Option<u8>,
    },

    /// A Paxos request or answer without a part it needs (a ballot, a
    /// proposal, an outcome).
    #[error("{call} message without its {part}")]
    Missing {
        /// The call (`PaxosPrepare`, `PaxosAccept`, `PaxosCommit`).
        call: &'static str,
        /// What it lacks.
        part: &'static str,
    },
}

impl PaxosReplicaError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            PaxosReplicaError::CorruptState { .. } | PaxosReplicaError::CorruptFloor { .. } => {
                Code::DataLoss
            }
            PaxosReplicaError::Missing { .. } => Code::InvalidArgument,
        }
    }

    /// Whether the error reports damaged stored state (retrying will not
    /// help; another replica must answer in this one's place).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            PaxosReplicaError::CorruptState { .. } | PaxosReplicaError::CorruptFloor { .. }
        )
    }
}
