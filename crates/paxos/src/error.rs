//! The paxos crate's one error type.
//!
//! Every variant is raised before anything was changed: a state that does
//! not decode is left where it is, and an electorate that is refused never
//! gets a proposer.

use ringstore_cell::CellDamage;
use ringstore_placement::HostId;

/// Why stored acceptor state does not read back ([`AcceptorState::decode`](crate::AcceptorState::decode)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateDamage {
    /// The bytes end before the named part.
    #[error("truncated: no room for its {0}")]
    Truncated(&'static str),
    /// The first byte names no format this build knows.
    #[error("unknown acceptor state format {0}")]
    UnknownFormat(u8),
    /// The bytes do not match their CRC-32.
    #[error("checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum {
        /// The CRC the state carries.
        stored: u32,
        /// The CRC of the bytes it covers.
        computed: u32,
    },
    /// Flags that no format defines.
    #[error("unknown flags {0:#x}")]
    UnknownFlags(u8),
    /// The accepted proposal's cell does not decode.
    #[error("corrupt cell in the accepted proposal: {0}")]
    Cell(#[source] CellDamage),
    /// Bytes left over after the last field.
    #[error("{0} bytes after the last field")]
    TrailingBytes(usize),
}

/// Why a paxos call failed. Nothing was changed in any case.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PaxosError {
    /// Stored acceptor state is damaged. Retrying will not help: the shell
    /// must refuse to take part for this key (answer nothing, so the
    /// proposer counts the replica as silent) until the state is repaired.
    #[error("corrupt acceptor state: {0}")]
    CorruptState(#[from] StateDamage),
    /// An electorate without natural replicas: no quorum can exist.
    #[error("an electorate needs at least one natural replica")]
    NoNaturalReplicas,
    /// A host listed twice (natural and pending, or twice in one list):
    /// it would vote twice.
    #[error("host {host} is listed twice in the electorate")]
    DuplicateHost {
        /// The host listed twice.
        host: HostId,
    },
}

impl PaxosError {
    /// Whether the error reports damaged bytes (retrying will not help).
    pub fn is_corruption(&self) -> bool {
        matches!(self, PaxosError::CorruptState(_))
    }
}

/// The paxos crate's result type.
pub type Result<T, E = PaxosError> = std::result::Result<T, E>;
